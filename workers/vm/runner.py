"""Boot one kernel once in a fresh transient libvirt domain and watch its console.

The outcome is one of ok, boot-failed, panic, timeout, infra-error; the console is kept in
every case, and the domain is destroyed on every path (a transient domain then vanishes).
Whether the benchmark's output is complete is the benchmark parser's call, not ours.
"""

import contextlib
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import libvirt

from workers.vm.connection import LibvirtUnavailable, open_connection
from workers.vm.domain import VMSpec, domain_xml, is_rcubench_domain

OK = "ok"
BOOT_FAILED = "boot-failed"
PANIC = "panic"
TIMEOUT = "timeout"
INFRA = "infra-error"

# What ends a run as "panic": the kernel's own words for fatal or wedged states.
FATAL = re.compile(
    r"(?P<what>Kernel panic - not syncing.*"
    r"|Oops: .*|Oops\b.*\[#\d+\].*"
    r"|kernel BUG at .*|BUG: .*"
    r"|INFO: task .* blocked for more than \d+ seconds\."
    r"|rcu: INFO: .* detected stalls.*|INFO: rcu_\w+ (?:self-)?detected stall.*)"
)
INIT_REACHED = re.compile(r"Run /init as init process|RCUBENCH-READY v1")
READY = re.compile(r"RCUBENCH-READY v1")
# The kernel's last words on power-off (kernel_power_off): nothing useful follows, so the
# run ends here and the domain is destroyed without waiting for libvirt to see QEMU stop.
POWERED_OFF = re.compile(r"reboot: Power down")
_POLL = 0.05
_PANIC_GRACE = 2.0  # seconds of console kept after a fatal line (the backtrace)


@dataclass(frozen=True)
class VMOutcome:
    outcome: str
    reason: str
    console: str
    wall_seconds: float  # domain start to domain end
    ready_seconds: float | None  # domain start to the guest's READY marker


def run_vm(
    uri: str,
    spec: VMSpec,
    *,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None = None,
) -> VMOutcome:
    """Boot `spec`, wait until it powers off, panics or times out; always destroy it."""
    spec.console_log.parent.mkdir(parents=True, exist_ok=True)
    spec.console_log.unlink(missing_ok=True)
    try:
        conn = open_connection(uri)
    except LibvirtUnavailable as exc:
        return VMOutcome(INFRA, str(exc), "", 0.0, None)
    dom = None
    started = time.monotonic()
    try:
        try:
            dom = conn.createXML(domain_xml(spec), 0)
        except libvirt.libvirtError as exc:
            return VMOutcome(INFRA, f"libvirt refused the domain: {exc}", "", 0.0, None)
        started = time.monotonic()
        return _watch(dom, spec, started, boot_timeout, run_timeout, on_poll)
    except libvirt.libvirtError as exc:
        return VMOutcome(INFRA, f"libvirt: {exc}", _read(spec.console_log),
                         time.monotonic() - started, None)  # fmt: skip
    finally:
        if dom is not None:
            _destroy(dom)
        conn.close()


def _watch(
    dom: libvirt.virDomain,
    spec: VMSpec,
    started: float,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None,
) -> VMOutcome:
    init_at: float | None = None
    ready_at: float | None = None
    fatal_at: float | None = None
    fatal = ""
    while True:
        time.sleep(_POLL)
        now = time.monotonic()
        console = _read(spec.console_log)
        active = _active(dom) and not POWERED_OFF.search(console)
        if on_poll is not None:
            on_poll()
        if init_at is None and INIT_REACHED.search(console):
            init_at = now
        if ready_at is None and READY.search(console):
            ready_at = now
        if fatal_at is None and (m := FATAL.search(console)):
            fatal_at, fatal = now, m.group("what").strip()
        elapsed = now - started
        ready = None if ready_at is None else ready_at - started
        if fatal_at is not None and (not active or now - fatal_at >= _PANIC_GRACE):
            return VMOutcome(PANIC, fatal, _settle(dom, spec), elapsed, ready)
        if not active:
            console = _read(spec.console_log)
            if init_at is None and not INIT_REACHED.search(console):
                return VMOutcome(BOOT_FAILED, "the VM stopped before the kernel ran init",
                                 console, elapsed, ready)  # fmt: skip
            return VMOutcome(OK, "powered off", console, elapsed, ready)
        if init_at is None and elapsed > boot_timeout:
            return VMOutcome(BOOT_FAILED, f"no init within the boot limit of {boot_timeout:.0f} s",
                             _settle(dom, spec), elapsed, ready)  # fmt: skip
        if init_at is not None and elapsed > boot_timeout + run_timeout:
            return VMOutcome(TIMEOUT, f"still running after {elapsed:.0f} s (limit "
                             f"{boot_timeout + run_timeout:.0f} s)", _settle(dom, spec),
                             elapsed, ready)  # fmt: skip


def _active(dom: libvirt.virDomain) -> bool:
    try:
        return bool(dom.isActive())
    except libvirt.libvirtError:
        return False  # a transient domain that stopped is gone


def _settle(dom: libvirt.virDomain, spec: VMSpec) -> str:
    _destroy(dom)
    return _read(spec.console_log)


def _destroy(dom: libvirt.virDomain) -> None:
    with contextlib.suppress(libvirt.libvirtError):  # already gone
        if dom.isActive():
            dom.destroy()


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


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
