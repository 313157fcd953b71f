"""One run on a bare-metal lab host, and bringing the host back to its known-good kernel.

A run: ssh to the host (its key pinned), copy the kernel and initramfs (kept by sha256,
so the A and B kernels of a comparison are copied once per host), `kexec -l` them, start
the host's console command (serial-over-LAN, a console server, or the stand-in's TCP
serial), `kexec -e`, and watch the console exactly as the VM runner watches a VM's:
the same scan, caps and outcomes (engine/run/console.py), so nothing downstream can tell a
lab run from a VM run. The kernel under test ends its run by restarting (the guest init's
rcubench.end=reboot), which resets the machine into its known-good kernel, or by powering
off (in-kernel benchmarks), or not at all (a hang).

Afterwards `restore` waits for the known-good kernel's sshd: at once through the power
command when the kernel powered off or hung, else after the host's own boot. A host that
does not answer within its boot timeout is power-cycled and reported `recovering`; one that
does not answer after `tries` power cycles is reported lost, for the caller to disable.

Commands are the operator's (trusted) templates: one command per line, split like a shell
would (no shell runs them), with {name}, {address} and {port} filled in per argument. A
filled-in value never starts with `-` (so it is never an option) and templates end the
options with `--` before a host argument where the tool allows it (docs/lab.md).
"""

import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import paramiko

from engine.build.artifacts import file_sha256
from engine.lab.ssh import Endpoint, SSHError, answers, check, connect, put, run
from engine.run.console import CONSOLE_MAX_BYTES, POLL, BootWatch, ConsoleFile, RunOutcome
from engine.run.outcomes import BOOT_FAILED, INFRA, OK, PANIC

# Root's own directory on the host: not world-writable like /var/tmp.
REMOTE_DIR = PurePosixPath("/var/lib/rcubench-lab")
_KEEP_FILES = 6  # kernels and initramfs images kept on the host (the newest used)
_SSH_TIMEOUT = 30.0
_CONSOLE_SETTLE = 0.5  # seconds for the console command to connect before kexec -e
_COMMAND_TIMEOUT = 120.0  # one power or console command


@dataclass(frozen=True)
class LabHost:
    """A lab host as the runner needs it (the operator's settings of one host)."""

    name: str
    endpoint: Endpoint
    console_command: str  # its stdout is the host's console byte stream
    power_command: str  # power-cycles the host into its known-good kernel; one per line
    boot_timeout: float  # power cycle or restart to sshd answering


@dataclass(frozen=True)
class LabJob:
    kernel: Path
    initrd: Path
    cmdline: str  # complete: console=, panic= and the benchmark's parameters
    console_log: Path


@dataclass
class Phases:
    """Where a lab run's time went, in seconds (the runner's own overhead beside the boot)."""

    connect: float = 0.0
    copy: float = 0.0
    load: float = 0.0  # kexec -l
    kernel: float = 0.0  # kexec -e to the end of the run (the VM runner's wall time)


@dataclass(frozen=True)
class LabRun:
    outcome: RunOutcome
    # restarted | powered-off | panicked (panic=-1 restarts at once, without "reboot:"
    # words) | hung (no end seen: needs the power command) | not-started (no kexec)
    ending: str
    phases: Phases = field(default_factory=Phases)


@dataclass(frozen=True)
class Restore:
    returned: bool
    power_cycles: int
    reason: str  # why not, when not returned
    seconds: float


_PLACEHOLDER = re.compile(r"\{(name|address|port)\}")


def _fill_value(field: str, value: str) -> str:
    """A host field as it may reach an argv: never read as an option (a leading `-`), never
    more than one word (whitespace or control characters). The model refuses such values
    (webapp/lab/models.py); this is the runner's own check for a row that bypassed it."""
    if not value or value.startswith("-") or any(c.isspace() or ord(c) < 32 for c in value):
        raise ValueError(f"lab host {field} {value!r:.80} is refused: empty, or starts with "
                         "'-', or holds whitespace or control characters")  # fmt: skip
    return value


def expand(template: str, host: LabHost) -> list[list[str]]:
    """The commands of a template: each non-empty line split as a shell would, then {name},
    {address} and {port} filled in within each argument (no shell ever runs them). Only
    those three are placeholders: any other brace is literal (`awk '{print}'`)."""
    values = {"name": _fill_value("name", host.name),
              "address": _fill_value("address", host.endpoint.address),
              "port": _fill_value("port", str(host.endpoint.port))}  # fmt: skip
    lines = [s for s in template.splitlines() if s.strip() and not s.lstrip().startswith("#")]
    return [
        [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in shlex.split(line)]
        for line in lines
    ]


def power_cycle(host: LabHost) -> list[str]:
    """Run the host's power command; each line's failure is reported, not fatal (destroying
    a machine that is off fails, and the start after it is what counts)."""
    try:
        commands = expand(host.power_command, host)
    except ValueError as exc:
        return [str(exc)]
    notes = []
    for argv in commands:
        try:
            done = subprocess.run(argv,  # noqa: S603 -- the operator's own command
                                  capture_output=True, text=True, check=False,
                                  timeout=_COMMAND_TIMEOUT)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"{argv[0]}: {exc}")
            continue
        if done.returncode != 0:
            notes.append(f"{shlex.join(argv)} exited {done.returncode}: "
                         f"{done.stderr.strip()[-300:]}")  # fmt: skip
    return notes


def probe(host: LabHost) -> dict[str, object]:
    """What the host is, read from it: arch, kernel, CPUs and SMT (sysfs), kexec present."""
    client = connect(host.endpoint, _SSH_TIMEOUT)
    try:
        script = (
            "uname -m; uname -r; nproc --all; "
            "cat /sys/devices/system/cpu/smt/control 2>/dev/null || echo notsupported; "
            "lscpu -p=SOCKET,CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l; "
            "lscpu -p=SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l; "
            "command -v kexec || echo none"
        )
        out = check(client, ["sh", "-c", script], _SSH_TIMEOUT).split("\n")
    finally:
        client.close()
    arch, release, cpus, smt, cores, sockets, kexec = (s.strip() for s in out[:7])
    n_cpus, n_cores, n_sockets = int(cpus), max(int(cores), 1), max(int(sockets), 1)
    return {
        "arch": arch, "kernel_release": release, "cpus": n_cpus, "sockets": n_sockets,
        "cores": n_cores // n_sockets, "threads": max(n_cpus // n_cores, 1),
        "smt_control": smt, "kexec": kexec != "none",
    }  # fmt: skip


def run_lab(
    host: LabHost,
    job: LabJob,
    *,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None = None,
    console_max_bytes: int = CONSOLE_MAX_BYTES,
) -> LabRun:
    """Boot `job` on `host` once by kexec and watch its console until the run ends, panics,
    times out or floods the console past `console_max_bytes`. The host is left where the
    kernel left it: `restore` brings it back."""
    phases = Phases()
    started = time.monotonic()
    try:
        console = expand(host.console_command, host)[0]
        client = connect(host.endpoint, _SSH_TIMEOUT)
    except (ValueError, SSHError) as exc:  # a refused host field, or no ssh
        return LabRun(RunOutcome(INFRA, str(exc), "", 0.0, None), "not-started", phases)
    phases.connect = time.monotonic() - started
    try:
        kernel, initrd = _stage(client, job, phases)
        loaded = time.monotonic()
        status, _, err = run(client, ["kexec", "-l", str(kernel), f"--initrd={initrd}",
                                      f"--command-line={job.cmdline}"], _SSH_TIMEOUT)  # fmt: skip
        phases.load = time.monotonic() - loaded
        if status != 0:  # the host's kexec refused this kernel image: the kernel's failure
            why = f"kexec refused the kernel: {err.strip()[-500:]}"
            return LabRun(RunOutcome(BOOT_FAILED, why, "", 0.0, None), "not-started", phases)
        job.console_log.parent.mkdir(parents=True, exist_ok=True)
        with job.console_log.open("wb") as sink:
            watcher = subprocess.Popen(  # noqa: S603 -- the operator's own command
                console, stdout=sink,
                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            time.sleep(_CONSOLE_SETTLE)
            if watcher.poll() is not None:
                why = f"the console command exited ({watcher.returncode}) before the boot"
                return LabRun(RunOutcome(INFRA, why, "", 0.0, None), "not-started", phases)
            # Detached, so the session ends cleanly before the kernel goes.
            check(client, ["sh", "-c", "(sleep 1; sync; kexec -e) >/dev/null 2>&1 &"],
                  _SSH_TIMEOUT)  # fmt: skip
            client.close()
            kexec_at = time.monotonic()
            out, ending = _watch(ConsoleFile(job.console_log, console_max_bytes), watcher,
                                 kexec_at, boot_timeout, run_timeout, on_poll)  # fmt: skip
            phases.kernel = out.wall_seconds
            return LabRun(out, ending, phases)
        finally:
            _stop(watcher)
    except SSHError as exc:
        return LabRun(RunOutcome(INFRA, str(exc), "", time.monotonic() - started, None),
                      "not-started", phases)  # fmt: skip
    finally:
        client.close()


def _stage(
    client: paramiko.SSHClient, job: LabJob, phases: Phases
) -> tuple[PurePosixPath, PurePosixPath]:
    """Copy the kernel and initramfs under names of their sha256 (a copy the host has is not
    made again), and prune all but the newest few the host kept."""
    started = time.monotonic()
    check(client, ["mkdir", "-p", str(REMOTE_DIR)], _SSH_TIMEOUT)
    paths = []
    for local in (job.kernel, job.initrd):
        remote = REMOTE_DIR / f"{file_sha256(local)[:24]}{''.join(local.suffixes[-2:])}"
        put(client, local, remote, _SSH_TIMEOUT * 4)
        paths.append(remote)
    prune = f"ls -t {REMOTE_DIR}/* | tail -n +{_KEEP_FILES + 1} | xargs -r rm -f"
    run(client, ["sh", "-c", prune], _SSH_TIMEOUT)
    phases.copy = time.monotonic() - started
    return paths[0], paths[1]


def _watch(
    console: ConsoleFile,
    watcher: subprocess.Popen[bytes],
    started: float,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None,
) -> tuple[RunOutcome, str]:
    """The VM runner's watch (engine/vm/runner.py) where the machine's power state is only
    known from the console: its last words (restart, power down) end the run."""
    watch = BootWatch(console, started)
    scan = console.scan
    try:
        while True:
            time.sleep(POLL)
            now = time.monotonic()
            watch.see(now)
            if on_poll is not None:
                on_poll()
            ended = scan.powered_off or scan.restarting
            ending = "powered-off" if scan.powered_off else "restarted"
            if flood := watch.flood():
                return watch.outcome(*flood, console.finish(), now), "hung"
            if watch.fatal_at is not None and (ended or watch.panic_settled(now)):
                # The backtrace is in; the lab command line's panic=-1 restarts the host.
                how = "powered-off" if scan.powered_off else "panicked"
                return watch.outcome(PANIC, scan.fatal, console.finish(), now), how
            if ended:
                text = console.finish()
                if not scan.init_reached:
                    why = "the kernel restarted before it ran init"
                    return watch.outcome(BOOT_FAILED, why, text, now), ending
                return watch.outcome(OK, ending, text, now), ending
            if watcher.poll() is not None:
                why = f"the console command exited ({watcher.returncode}) during the run"
                return watch.outcome(INFRA, why, console.finish(), now), "hung"
            if limit := watch.over_limit(now, boot_timeout, run_timeout):
                return watch.outcome(*limit, console.finish(), now), "hung"
    finally:
        console.close()


def _stop(watcher: subprocess.Popen[bytes]) -> None:
    if watcher.poll() is None:
        watcher.terminate()
        try:
            watcher.wait(5)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()


def restore(
    host: LabHost,
    ending: str,
    *,
    tries: int,
    on_recovering: Callable[[int, str], None] | None = None,
    on_poll: Callable[[], None] | None = None,
) -> Restore:
    """Bring the host back to its known-good kernel after a run that ended as `ending`.

    A restarted or panicked host is waited for; a powered-off or hung one is power-cycled
    at once, as the expected way back, not a recovery. Past its boot timeout without
    sshd, the host is power-cycled again (`on_recovering(try, why)`), up to `tries` times."""
    started = time.monotonic()
    cycles, notes = 0, []
    if ending in ("powered-off", "hung"):
        notes, cycles = power_cycle(host), 1
    why = ""
    for attempt in range(tries + 1):
        if _wait_ssh(host, on_poll):
            return Restore(True, cycles, "", time.monotonic() - started)
        why = f"sshd did not answer within {host.boot_timeout:.0f} s"
        if attempt == tries:
            break
        if on_recovering is not None:
            on_recovering(attempt + 1, why)
        notes, cycles = power_cycle(host), cycles + 1
    reason = f"{why} after {cycles} power cycles"
    if notes:  # what the power command said the last time: the operator's first clue
        reason += f" (power command: {'; '.join(notes)})"
    return Restore(False, cycles, reason[:2000], time.monotonic() - started)


def _wait_ssh(host: LabHost, on_poll: Callable[[], None] | None) -> bool:
    deadline = time.monotonic() + host.boot_timeout
    while time.monotonic() < deadline:
        if on_poll is not None:
            on_poll()
        if answers(host.endpoint, timeout=min(10.0, max(deadline - time.monotonic(), 1.0))):
            return True
        time.sleep(min(2.0, max(deadline - time.monotonic(), 0.0)))
    return False
